import{a as e,b as r}from"./chunk-OO6OXEJO.mjs";import"./chunk-MWUZ53VY.mjs";import"./chunk-V3YWWTDH.mjs";export{e as TreemapModule,r as createTreemapServices};
