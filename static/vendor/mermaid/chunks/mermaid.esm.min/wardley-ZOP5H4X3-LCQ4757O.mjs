import{a as e,b as r}from"./chunk-SQB72GJH.mjs";import"./chunk-MWUZ53VY.mjs";import"./chunk-V3YWWTDH.mjs";export{e as WardleyModule,r as createWardleyServices};
