import{a as e,b as r}from"./chunk-QQEUQRS4.mjs";import"./chunk-MWUZ53VY.mjs";import"./chunk-V3YWWTDH.mjs";export{e as RailroadPegModule,r as createRailroadPegServices};
