import{a as r,b as o}from"./chunk-QQ4VTD2Z.mjs";import"./chunk-MWUZ53VY.mjs";import"./chunk-V3YWWTDH.mjs";export{r as RailroadModule,o as createRailroadServices};
